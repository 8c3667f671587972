package sandboxd

// rlimitNPROC is RLIMIT_NPROC, which package syscall does not name.
const rlimitNPROC = 6
