# Read by llama.cpp's own project() call when the Makefile builds llama-cpp-python
# (-DCMAKE_PROJECT_llama.cpp_INCLUDE=<this file>). llama-cpp-python forces llama.cpp's
# `common` library (and with it cpp-httplib) on, as a cache variable, for its multimodal
# library; LLAVA_BUILD=OFF drops that library, and nothing else the Python package loads
# links `common`. A normal variable in llama.cpp's scope shadows the forced cache entry,
# so the compile skips about sixty files of chat parsers and the downloader: minutes on
# two cores, with libllama and libggml built from the same sources with the same flags.
set(LLAMA_BUILD_COMMON OFF)
