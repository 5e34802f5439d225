# Expands schedules/variants.json's spaces (tools/variants.py, which names every variant) and,
# for each variant, makes a Halide library and a row of the runtime registry. Defines:
#   schedx_halide_runtime   the one Halide runtime every variant shares (one CUDA module cache)
#   SCHEDX_VARIANT_LIBS     the variant library targets
#   SCHEDX_VARIANT_OBJECTS  their object files (a CPU variant has one per target and a wrapper),
#                           also listed in variant_objects.txt for the fuzz build
#   SCHEDX_VARIANT_TABLE    the generated registry source (runtime/variant_table.cpp.in)
find_package(Python3 COMPONENTS Interpreter REQUIRED)
set(_json_file "${PROJECT_SOURCE_DIR}/schedules/variants.json")
set(_expander "${PROJECT_SOURCE_DIR}/tools/variants.py")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_json_file}" "${_expander}")
file(READ "${_json_file}" _json)
# targets.cpu lists CPU targets best first, the baseline last: Halide builds each CPU variant
# for every one and its wrapper picks, at the first call, the first one the running CPU has.
string(JSON _cpu_target GET "${_json}" targets cpu)
string(REPLACE "," ";" _cpu_target "${_cpu_target}")
string(JSON _cuda_target GET "${_json}" targets cuda)
add_halide_runtime(schedx_halide_runtime TARGETS ${_cuda_target})

set(SCHEDX_VARIANT_LIBS "")
set(SCHEDX_VARIANT_OBJECTS "")
set(SCHEDX_VARIANT_INCLUDES "")
set(SCHEDX_VARIANT_ROWS "")
# One call per variant. kernels: the variant whose pipeline it calls (itself, or an earlier one
# that differs in runtime settings only); params: the generator's; row: params and settings.
macro(schedx_variant name op device generator executable kernels autoscheduler params row)
  if ("${kernels}" STREQUAL "${name}")
    set(_as_args "")
    if (NOT "${autoscheduler}" STREQUAL "")
      set(_as_args AUTOSCHEDULER Halide::${autoscheduler})
    endif ()
    separate_arguments(_params UNIX_COMMAND "${params}")
    # The lowered statement (which the tests read for CUDA variants): a multi-target library
    # writes one per target under other names than the one STMT declares, which would leave
    # that output missing and the library regenerated on every build.
    set(_targets ${_${device}_target})
    list(LENGTH _targets _n_targets)
    set(_stmt_args "")
    if (_n_targets EQUAL 1)
      set(_stmt_args STMT ${name}_stmt)
    endif ()
    add_halide_library(${name} FROM ${executable} GENERATOR ${generator} TARGETS ${_targets}
                       USE_RUNTIME schedx_halide_runtime PARAMS ${_params} ${_as_args}
                       ${_stmt_args} SCHEDULE ${name}_schedule)
    list(APPEND SCHEDX_VARIANT_LIBS ${name})
    # add_halide_library's object names: one per target (with its -no_runtime) and a wrapper
    # when there are several.
    if (_n_targets EQUAL 1)
      list(APPEND SCHEDX_VARIANT_OBJECTS ${name}.o)
    else ()
      foreach (_t IN LISTS _targets)
        list(APPEND SCHEDX_VARIANT_OBJECTS ${name}-${_t}-no_runtime.o)
      endforeach ()
      list(APPEND SCHEDX_VARIANT_OBJECTS ${name}_wrapper.o)
    endif ()
    string(APPEND SCHEDX_VARIANT_INCLUDES "#include \"${name}.h\"\n")
  endif ()
  string(APPEND SCHEDX_VARIANT_ROWS
         "    {\"${name}\", \"${op}\", Device::${device}, \"${row}\", ${kernels}_argv, ${kernels}_metadata},\n")
endmacro()
set(_expanded "${CMAKE_CURRENT_BINARY_DIR}/variants_expanded.cmake")
execute_process(COMMAND "${Python3_EXECUTABLE}" "${_expander}" cmake "${_expanded}" COMMAND_ERROR_IS_FATAL ANY)
include("${_expanded}")

set(SCHEDX_VARIANT_TABLE "${CMAKE_CURRENT_BINARY_DIR}/variant_table.cpp")
configure_file("${PROJECT_SOURCE_DIR}/runtime/variant_table.cpp.in" "${SCHEDX_VARIANT_TABLE}" @ONLY)
string(REPLACE ";" "\n" _object_lines "${SCHEDX_VARIANT_OBJECTS}")
file(CONFIGURE OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/variant_objects.txt" CONTENT "${_object_lines}\n")
