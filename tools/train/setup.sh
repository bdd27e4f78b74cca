#!/usr/bin/env bash
# The training tool's own setup (not the test suite's): Debian's PyTorch for
# /usr/bin/python3, and OpenBLAS in place of the reference BLAS that
# python3-torch otherwise links (about 10x on this machine's matrix products).
set -euo pipefail
need=()
/usr/bin/python3 -c "import torch" 2>/dev/null || need+=(python3-torch)
dpkg -s libopenblas0-openmp >/dev/null 2>&1 || need+=(libopenblas0-openmp)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
/usr/bin/python3 -c "import torch; print('torch', torch.__version__)"
