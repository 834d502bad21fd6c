# A toolchain file for the WebAssembly build: Emscripten's own platform file,
# wherever emcc is (Debian's package puts it under /usr/share/emscripten;
# an emsdk checkout says where through $EMSCRIPTEN). scripts/wasm.sh and
# the "wasm" preset of CMakePresets.json use it.
set(_infer_em_roots "$ENV{EMSCRIPTEN}")
find_program(_infer_emcc emcc)
if(_infer_emcc)
  get_filename_component(_infer_emcc_real "${_infer_emcc}" REALPATH)
  get_filename_component(_infer_emcc_dir "${_infer_emcc_real}" DIRECTORY)
  list(APPEND _infer_em_roots "${_infer_emcc_dir}")
endif()
list(APPEND _infer_em_roots /usr/share/emscripten /usr/lib/emscripten)
foreach(_root IN LISTS _infer_em_roots)
  if(_root AND EXISTS "${_root}/cmake/Modules/Platform/Emscripten.cmake")
    include("${_root}/cmake/Modules/Platform/Emscripten.cmake")
    # Debian's emcc runs its JavaScript optimizer under node with Debian's
    # node-acorn, which a node from elsewhere (NodeSource's) does not look
    # for: the link is told where it is
    if(EXISTS /usr/share/nodejs/acorn)
      set(CMAKE_C_LINKER_LAUNCHER ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)
    endif()
    return()
  endif()
endforeach()
message(FATAL_ERROR "no Emscripten here (emcc, $EMSCRIPTEN): sh scripts/wasm.sh installs Debian's, or apt-get install emscripten")
