#!/usr/bin/env bash
# Set up, build, and run every test (unit, conformance on every CPU path and OpenCL device, command line), then the
# sanitizer job (scripts/sanitize.sh: ASan + UBSan build, reduced suite, fuzz harnesses for a bounded time), then
# print the conformance harness's counts of checked cases and both suites' results.
set -eo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
setup_seconds=$SECONDS
status=0
(cd build && ctest --output-on-failure -j 2 2>&1 | tee ctest-output.log) || status=$?
main_seconds=$((SECONDS - setup_seconds))
echo
echo "sanitizer job (scripts/sanitize.sh):"
sanitizer=0
scripts/sanitize.sh || sanitizer=$?
sanitizer_seconds=$((SECONDS - setup_seconds - main_seconds))
echo
echo "conformance summary:"
grep -hE "^conformance: .*(checks|configurations)" build/Testing/Temporary/LastTest.log || echo "  (no conformance lines found)"
echo "sanitizer job: $(grep -E "tests passed, [0-9]+ tests failed" build-asan/ctest-sanitizer.log 2>/dev/null | tail -1 ||
                       echo "did not run to the end")"
echo "sanitizer job, ThreadSanitizer: $(grep -E "tests passed, [0-9]+ tests failed" build-tsan/ctest-tsan.log 2>/dev/null |
                                        tail -1 || echo "did not run to the end")"
# Where the time went (CI's budget is 25 minutes): setup and build, the main suite, the sanitizer job.
echo "seconds: setup and build ${setup_seconds}, main suite ${main_seconds}, sanitizer job (build and tests) ${sanitizer_seconds}"
# ctest's own closing line of the main suite last, where CI reads it.
grep -E "tests passed, [0-9]+ tests failed" build/ctest-output.log | tail -1
((status)) && exit $status
exit $sanitizer
