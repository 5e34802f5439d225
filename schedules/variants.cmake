# Reads schedules/variants.json (the single list of variants) and, for each entry, makes a
# Halide library and a row of the runtime registry. Defines:
#   schedx_halide_runtime   the one Halide runtime every variant shares (one CUDA module cache)
#   SCHEDX_VARIANT_LIBS     the variant library targets
#   SCHEDX_VARIANT_TABLE    the generated registry source (runtime/variant_table.cpp.in)
set(_json_file "${PROJECT_SOURCE_DIR}/schedules/variants.json")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_json_file}")
file(READ "${_json_file}" _json)

string(JSON _cpu_target GET "${_json}" targets cpu)
string(JSON _cuda_target GET "${_json}" targets cuda)
add_halide_runtime(schedx_halide_runtime TARGETS ${_cuda_target})

set(SCHEDX_VARIANT_LIBS "")
set(_includes "")
set(_rows "")
string(JSON _n_ops LENGTH "${_json}" operators)
math(EXPR _last_op "${_n_ops} - 1")
foreach (_i RANGE ${_last_op})
  string(JSON _op MEMBER "${_json}" operators ${_i})
  string(JSON _gen GET "${_json}" operators ${_op} generator)
  string(JSON _n LENGTH "${_json}" operators ${_op} variants)
  math(EXPR _last "${_n} - 1")
  foreach (_j RANGE ${_last})
    string(JSON _v GET "${_json}" operators ${_op} variants ${_j})
    string(JSON _name GET "${_v}" name)
    string(JSON _device GET "${_v}" device)
    string(JSON _autosched ERROR_VARIABLE _no_as GET "${_v}" autoscheduler)
    set(_params "")
    set(_param_text "")
    string(JSON _params_json GET "${_v}" params)
    set(_params_json_${_name} "${_params_json}")
    string(JSON _jit_${_name} ERROR_VARIABLE _no_jit GET "${_v}" jit_max_registers)
    if (NOT _no_jit STREQUAL "NOTFOUND")
      set(_jit_${_name} 0)
    endif ()
    string(JSON _np LENGTH "${_v}" params)
    if (_np GREATER 0)
      math(EXPR _lastp "${_np} - 1")
      foreach (_k RANGE ${_lastp})
        string(JSON _key MEMBER "${_v}" params ${_k})
        string(JSON _val GET "${_v}" params ${_key})
        list(APPEND _params "${_key}=${_val}")
        string(APPEND _param_text "${_key}=${_val} ")
      endforeach ()
    endif ()
    if (_device STREQUAL "cuda")
      set(_target ${_cuda_target})
    else ()
      set(_target ${_cpu_target})
    endif ()
    # Runtime settings, not generator parameters: the CUDA JIT's register cap, the
    # cuBLASLt configuration of a planes variant's GEMM, the cuBLASLt heuristic's rank for
    # a rescale variant's GEMM, the device capability its rewritten PTX needs (min_sm),
    # and kernels_of (below).
    foreach (_setting jit_max_registers cublaslt_config cublaslt_heuristic_rank min_sm kernels_of)
      string(JSON _val ERROR_VARIABLE _no_setting GET "${_v}" ${_setting})
      if (_no_setting STREQUAL "NOTFOUND")
        string(APPEND _param_text "${_setting}=${_val} ")
      endif ()
    endforeach ()
    set(_as_args "")
    if (NOT _no_as STREQUAL "NOTFOUND" OR _autosched STREQUAL "")
      set(_autosched "")
    else ()
      set(_as_args AUTOSCHEDULER Halide::${_autosched})
      string(APPEND _param_text "autoscheduler=${_autosched} ")
    endif ()
    # kernels_of: an entry that differs from an earlier one only in runtime settings calls
    # that entry's generated pipeline instead of generating the same one again.
    string(JSON _kernels ERROR_VARIABLE _no_kernels GET "${_v}" kernels_of)
    if (_no_kernels STREQUAL "NOTFOUND")
      if (NOT _kernels IN_LIST SCHEDX_VARIANT_LIBS)
        message(FATAL_ERROR "variants.json: ${_name}'s kernels_of names no earlier entry: ${_kernels}")
      endif ()
      string(JSON _same_params EQUAL "${_params_json_${_kernels}}" "${_params_json}")
      if (NOT _same_params)
        message(FATAL_ERROR "variants.json: ${_name} has other params than ${_kernels}, whose kernels it calls")
      endif ()
      # A pipeline's CUDA module is loaded once, under the cap of whichever entry calls it
      # first: a different cap needs a pipeline of its own.
      if (NOT _jit_${_name} EQUAL _jit_${_kernels})
        message(FATAL_ERROR "variants.json: ${_name}'s jit_max_registers differs from ${_kernels}'s, whose kernels it calls")
      endif ()
    else ()
      set(_kernels ${_name})
      add_halide_library(${_name} FROM schedx_generators
                         GENERATOR ${_gen}
                         TARGETS ${_target}
                         USE_RUNTIME schedx_halide_runtime
                         PARAMS ${_params}
                         ${_as_args}
                         STMT ${_name}_stmt
                         SCHEDULE ${_name}_schedule)
      list(APPEND SCHEDX_VARIANT_LIBS ${_name})
      string(APPEND _includes "#include \"${_name}.h\"\n")
    endif ()
    string(STRIP "${_param_text}" _param_text)
    string(APPEND _rows "    {\"${_name}\", \"${_op}\", Device::${_device}, \"${_param_text}\", ${_kernels}_argv, ${_kernels}_metadata},\n")
  endforeach ()
endforeach ()

set(SCHEDX_VARIANT_INCLUDES "${_includes}")
set(SCHEDX_VARIANT_ROWS "${_rows}")
set(SCHEDX_VARIANT_TABLE "${CMAKE_CURRENT_BINARY_DIR}/variant_table.cpp")
configure_file("${PROJECT_SOURCE_DIR}/runtime/variant_table.cpp.in" "${SCHEDX_VARIANT_TABLE}" @ONLY)
