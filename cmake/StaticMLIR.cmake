# Find Debian's MLIR/LLVM 22 and make every MLIR target link the static
# archives only, so that `g4c` runs on a machine with no LLVM installed.
#
# Debian's exported MLIR* targets name the shared imported target `LLVM`
# (libLLVM.so) in INTERFACE_LINK_LIBRARIES, and LLVMSupport names libz3 and
# zstd. We replace `LLVM` with an INTERFACE target over the few static LLVM
# components MLIR needs, and trim LLVMSupport's interface (DESIGN.md §1).
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
message(STATUS "g4c: MLIR ${MLIR_DIR}, LLVM ${LLVM_PACKAGE_VERSION}")

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)

add_library(g4c_llvm_static INTERFACE)
target_link_libraries(g4c_llvm_static INTERFACE
  LLVMCore LLVMRemarks LLVMBitstreamReader LLVMSupport LLVMDemangle)
set_target_properties(LLVMSupport PROPERTIES
  INTERFACE_LINK_LIBRARIES "rt;dl;m;LLVMDemangle;Threads::Threads")

# Rewrite `LLVM` → g4c_llvm_static in every imported MLIR target.
set(_g4c_mlir_targets)
foreach(_lib IN LISTS MLIR_ALL_LIBS MLIR_DIALECT_LIBS MLIR_CONVERSION_LIBS MLIR_EXTENSION_LIBS MLIR_TRANSLATION_LIBS)
  list(APPEND _g4c_mlir_targets ${_lib})
endforeach()
file(STRINGS "${MLIR_CMAKE_DIR}/MLIRTargets.cmake" _g4c_lines REGEX "^add_library\\(MLIR[A-Za-z0-9_]+ ")
foreach(_line IN LISTS _g4c_lines)
  string(REGEX REPLACE "^add_library\\((MLIR[A-Za-z0-9_]+) .*" "\\1" _t "${_line}")
  list(APPEND _g4c_mlir_targets ${_t})
endforeach()
list(REMOVE_DUPLICATES _g4c_mlir_targets)
foreach(_t IN LISTS _g4c_mlir_targets)
  if(TARGET ${_t})
    get_target_property(_libs ${_t} INTERFACE_LINK_LIBRARIES)
    if(_libs)
      list(TRANSFORM _libs REPLACE "^LLVM$" "g4c_llvm_static")
      set_target_properties(${_t} PROPERTIES INTERFACE_LINK_LIBRARIES "${_libs}")
    endif()
  endif()
endforeach()

# MLIR include dirs are attached per target (g4c_mlir_includes), never
# globally: runtime/ must not see them (tests/layering checks this).
add_library(g4c_mlir_includes INTERFACE)
target_include_directories(g4c_mlir_includes SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
target_compile_definitions(g4c_mlir_includes INTERFACE ${LLVM_DEFINITIONS})

set(MLIR_TABLEGEN_EXE mlir-tblgen)
find_program(G4C_FILECHECK NAMES FileCheck-22 FileCheck HINTS /usr/lib/llvm-22/bin)
find_program(G4C_LIT NAMES lit-22 lit HINTS /usr/lib/llvm-22/bin)
