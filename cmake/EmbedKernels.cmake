# Embeds kernel sources (.cl, .cu, .h) into the library as string literals, keyed by their path
# relative to src/kernels, so the binary needs no files beside it (CONVTUNE_KERNEL_DIR overrides at run time).
function(convtune_embed_kernels target kernel_root)
  file(GLOB_RECURSE _sources RELATIVE ${kernel_root} CONFIGURE_DEPENDS
       ${kernel_root}/*.cl ${kernel_root}/*.cu ${kernel_root}/*.h)
  list(SORT _sources)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/embedded_kernels.cpp)
  set(_deps)
  foreach(_rel IN LISTS _sources)
    list(APPEND _deps ${kernel_root}/${_rel})
  endforeach()
  # "|" separates the files on the command line: a ";" would split the argument.
  string(REPLACE ";" "|" _sources_arg "${_sources}")
  add_custom_command(
    OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -DKERNEL_ROOT=${kernel_root} -DOUTPUT=${_out} "-DSOURCES=${_sources_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/WriteEmbeddedKernels.cmake
    DEPENDS ${_deps} ${PROJECT_SOURCE_DIR}/cmake/WriteEmbeddedKernels.cmake
    COMMENT "Embedding kernel sources"
    VERBATIM)
  target_sources(${target} PRIVATE ${_out})
endfunction()
