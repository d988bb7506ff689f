# Read by llama.cpp's own project() call when the Makefile builds llama-cpp-python
# (-DCMAKE_PROJECT_llama.cpp_INCLUDE=<this file>). llama-cpp-python forces llama.cpp's
# `common` library (and with it cpp-httplib) on, as a cache variable, for its multimodal
# library; LLAVA_BUILD=OFF drops that library, and nothing else the Python package loads
# links `common`. A normal variable in llama.cpp's scope shadows the forced cache entry,
# so the compile skips about sixty files of chat parsers and the downloader: minutes on
# two cores, with libllama and libggml built from the same sources with the same flags.
set(LLAMA_BUILD_COMMON OFF)

# libllama (model loading, graph building, the vocabulary, grammar and sampler) is host
# code: the matrix kernels that set the model's speed are in ggml-cpu and keep the release
# -O3. libllama is 70% of the compile's CPU time, and at -O1 the whole compile takes about
# a fifth less on two cores. -O1 reorders no floating-point arithmetic, and libllama is
# built without FMA, so the replies are the same bit for bit (4 December 2026: the same
# answers to every call of `fhs bench llm`, at the same tokens/s). The option is added
# once the target exists (DEFER: CMake 3.19 or newer; older CMake keeps -O3 everywhere).
# -DLLAMA_HOST_OPT=-O3 restores llama.cpp's own flags.
if(NOT DEFINED LLAMA_HOST_OPT)
    set(LLAMA_HOST_OPT -O1)
endif()
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
    cmake_language(DEFER CALL target_compile_options llama PRIVATE ${LLAMA_HOST_OPT})
endif()
