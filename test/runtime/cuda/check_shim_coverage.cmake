# Fails when a kernel test of test/runtime/kernels calls a pipert kernel (a
# function of pipert_kernels.h that takes the context: its pointers are
# backend buffers) that device_shim.h does not redirect: the CUDA build of
# that test would hand host pointers to a CUDA kernel. Needs no device.
#   cmake -DKERNELS_H=... -DSHIM_H=... -DTESTS_DIR=... -P check_shim_coverage.cmake
cmake_minimum_required(VERSION 3.20)
# The kernel names in `text`: each match of `pattern`, reduced to its
# pipert_* name, once.
function(pipert_names out text pattern)
  string(REGEX MATCHALL "${pattern}" matches "${text}")
  set(names)
  foreach(m IN LISTS matches)
    string(REGEX MATCH "pipert_[a-z0-9_]+" name "${m}")
    list(APPEND names ${name})
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} ${names} PARENT_SCOPE)
endfunction()

file(READ ${KERNELS_H} header)
pipert_names(kernels "${header}" "pipert_[a-z0-9_]+\\([ \t\r\n]*pipert_context \\*ctx")
list(LENGTH kernels n_kernels)
if(n_kernels LESS 50)
  message(FATAL_ERROR "found only ${n_kernels} kernels in ${KERNELS_H}: the pattern is stale")
endif()

file(READ ${SHIM_H} shim)
pipert_names(wrapped "${shim}" "#define pipert_[a-z0-9_]+ ")

file(GLOB sources ${TESTS_DIR}/*.cpp ${TESTS_DIR}/*.h)
set(used)
foreach(f IN LISTS sources)
  file(READ ${f} text)
  string(REGEX MATCHALL "pipert_[a-z0-9_]+" ids "${text}")
  list(APPEND used ${ids})
endforeach()
list(REMOVE_DUPLICATES used)

set(missing)
foreach(k IN LISTS kernels)
  if(k IN_LIST used AND NOT k IN_LIST wrapped)
    list(APPEND missing ${k})
  endif()
endforeach()
if(missing)
  string(REPLACE ";" " " missing "${missing}")
  message(FATAL_ERROR "kernels the tests in ${TESTS_DIR} call but ${SHIM_H} does not wrap: "
                      "${missing}")
endif()
message(STATUS "device_shim.h wraps every kernel the shared kernel tests call")
