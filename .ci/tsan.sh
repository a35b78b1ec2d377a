#!/usr/bin/env bash
# CI: the inline probe's tests under ThreadSanitizer. Training jobs call its C ABI from several
# threads (close() among them), so races there would corrupt a training process. Also the progress
# line, which the threads of fleet sdc and fleet goodput add to at once. CPU backend only, and only
# those tests are built. OpenMP runs one thread per team there (OMP_THREAD_LIMIT=1 in the
# preset): libgomp is not instrumented, so TSan would report its fork and join as races.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset tsan
cmake --build --preset tsan
ctest --preset tsan
