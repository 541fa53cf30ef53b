# Test fixture, included by a copy of examples/minitorch: an optional library found
# the way PyTorch finds cuDNN — find_path / find_library, which read CMAKE_PREFIX_PATH from the
# environment themselves — and switched off with only a warning when absent. The configure then
# prints a feature summary in PyTorch's format (cmake/Summary.cmake).
option(USE_MINIDNN "Use minidnn when it is found" ON)
if(USE_MINIDNN)
  find_path(MINIDNN_INCLUDE_DIR minidnn.h)
  find_library(MINIDNN_LIBRARY NAMES minidnn)
  if(MINIDNN_INCLUDE_DIR AND MINIDNN_LIBRARY)
    message(STATUS "Found minidnn: ${MINIDNN_LIBRARY}")
  else()
    message(WARNING "Cannot find minidnn library. Turning the option off")
    set(USE_MINIDNN OFF)
  endif()
endif()
message(STATUS "")
message(STATUS "******** Summary ********")
message(STATUS "  USE_CUDA              : ${USE_CUDA}")
message(STATUS "  USE_MINIDNN           : ${USE_MINIDNN}")
