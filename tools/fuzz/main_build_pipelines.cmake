# The fuzz build's pipelines: the objects, headers and registry table that the main build
# (SCHEDX_MAIN_BUILD_DIR) generated from schedules/variants.json, linked as they are, so no
# variant is generated twice. Defines what cmake/variants.cmake defines for
# runtime/CMakeLists.txt: SCHEDX_VARIANT_LIBS (here header-only imported targets),
# SCHEDX_VARIANT_OBJECTS, SCHEDX_VARIANT_TABLE, and SCHEDX_PIPELINE_DIR, where the objects are.
set(SCHEDX_PIPELINE_DIR "${SCHEDX_MAIN_BUILD_DIR}/runtime")
set(SCHEDX_VARIANT_TABLE "${SCHEDX_PIPELINE_DIR}/variant_table.cpp")
if (NOT EXISTS "${SCHEDX_VARIANT_TABLE}" OR NOT EXISTS "${SCHEDX_PIPELINE_DIR}/schedx_halide_runtime.o")
  message(FATAL_ERROR "SCHEDX_FUZZ links the pipelines of ${SCHEDX_MAIN_BUILD_DIR}: build that first")
endif ()

# The table includes one header per generated library: those are the libraries, and a new
# variant list reconfigures this build.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${SCHEDX_VARIANT_TABLE}"
                                                                "${SCHEDX_PIPELINE_DIR}/variant_objects.txt")
file(STRINGS "${SCHEDX_VARIANT_TABLE}" _includes REGEX "^#include \"[A-Za-z0-9_]+\\.h\"$")
set(SCHEDX_VARIANT_LIBS "")
foreach (_line IN LISTS _includes)
  string(REGEX REPLACE "^#include \"(.+)\\.h\"$" "\\1" _lib "${_line}")
  if (NOT _lib STREQUAL "registry")
    add_library(${_lib} INTERFACE IMPORTED)
    set_target_properties(${_lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${SCHEDX_PIPELINE_DIR}")
    list(APPEND SCHEDX_VARIANT_LIBS ${_lib})
  endif ()
endforeach ()
file(STRINGS "${SCHEDX_PIPELINE_DIR}/variant_objects.txt" SCHEDX_VARIANT_OBJECTS)
