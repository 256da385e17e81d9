# Passed to llama-cpp-python's build as -DCMAKE_PROJECT_INCLUDE=<this file>: CMake
# includes it after every project() call. llama-cpp-python forces LLAMA_BUILD_COMMON
# ON, yet the Python package loads only libllama and libggml*: llama.cpp's `common`
# library (51 of the 127 compile steps, plus cpp-httplib) is built and shipped unused.
# Turning it off right after llama.cpp's own project() skips that work.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
endif()
