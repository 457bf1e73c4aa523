// libFuzzer's driver, linked in by `-sanitize=fuzzer` (only the fuzz build, `make fuzz`, imports
// this module). `swiftplex-fuzz TARGET [libFuzzer flags]` picks the target and hands the rest of
// the command line to the driver with that target's callback.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
