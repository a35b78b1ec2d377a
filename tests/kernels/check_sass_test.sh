#!/usr/bin/env bash
# scripts/check_sass.sh's resource limits, with a stand-in for cuobjdump whose listings are a
# library's as cuobjdump prints them: a clean library passes; a kernel with a stack frame or local
# memory (a spill) fails naming it, and so does a GEMM check kernel over 128 registers. (The real
# library is checked by the ctest kernels.sass_vector_access where nvcc is present.)
#   tests/kernels/check_sass_test.sh REPO WORKDIR
set -euo pipefail
repo=$1
mkdir -p "$2"
work=$(mktemp -d "$(cd "$2" && pwd)/check_sass_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
touch "$work/libsdc_kernels.a"

# stand_in NAME REG STACK LOCAL: a cuobjdump whose library holds the SIMT GEMM kernel (with its
# 16-byte shared loads) and float_lines<float> with these resources.
stand_in() {
  local simt=_ZN3sdc45_GLOBAL__N__4a769aed_12_gemm_simt_cu_a5820bce21gemm_simt_fp32_kernelILb0EEEvPKfS3_Pfjjjb
  local lines=_ZN3sdc12_GLOBAL__N_111float_linesIfEEvv
  cat >"$work/$1" <<FAKE
#!/bin/sh
case \$1 in
  -sass)
    echo "	arch = sm_90"
    echo "		Function : $simt"
    echo "        /*0090*/                   LDS.128 R4, [R2] ;"
    echo "		Function : $lines"
    echo "        /*0090*/                   LDG.E.64 R2, desc[UR4][R2.64] ;" ;;
  -res-usage)
    echo "arch = sm_90"
    echo "Resource usage:"
    echo " Function $simt:"
    echo "  REG:121 STACK:0 SHARED:16896 LOCAL:0 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0"
    echo " Function $lines:"
    echo "  REG:$2 STACK:$3 SHARED:2048 LOCAL:$4 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0" ;;
esac
FAKE
  chmod +x "$work/$1"
}

check() {
  local name=$1 want=$2 pattern=$3 rc=0
  "$repo/scripts/check_sass.sh" "$work/libsdc_kernels.a" "$work/$name" >"$work/$name.log" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$work/$name.log" >&2; fail "$name: exit $rc, not $want"; }
  grep -q "$pattern" "$work/$name.log" || { cat "$work/$name.log" >&2; fail "$name: no '$pattern'"; }
}

stand_in clean 128 0 0
check clean 0 'none of 2 spills'
stand_in spill 96 0 24
check spill 1 'FAIL: sm_90 .*float_lines<float>.* spills: stack 0 bytes, local 24 bytes'
stand_in stack 96 16 0
check stack 1 'spills: stack 16 bytes'
stand_in registers 226 0 0
check registers 1 'float_lines<float>.* uses 226 registers, over 128'
echo "check_sass_test: passed"
