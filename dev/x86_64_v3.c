/*
 * Preload library that makes this process see an x86-64-v3 CPU (AVX2, FMA, F16C, BMI2):
 * every AVX-512, AVX-VNNI, AMX, GFNI and AVX10 feature bit is cleared from what CPUID
 * reports. ONNX Runtime's MLAS, numpy and the Rust tokenizers pick their kernels from
 * CPUID at load time and have no switch of their own, so this is how `python -m dev.bench_cpu
 * --isa x86-64-v3` runs the encoder's AVX2 kernels on a CPU that has AVX-512.
 *
 * How: arch_prctl(ARCH_SET_CPUID, 0) makes the CPUID instruction fault (Linux, on CPUs
 * and hypervisors with CPUID faulting: /proc/cpuinfo lists `cpuid_fault`). The SIGSEGV
 * handler runs the real CPUID with faulting switched off for that instant, clears the
 * bits, writes the registers back and steps over the two-byte instruction. Threads
 * inherit the faulting state. Programs that install a SIGSEGV handler of their own (gcc's
 * cc1, Python's faulthandler) would otherwise get the fault and crash, so this library
 * also stands in for sigaction() and signal() on SIGSEGV: the handler they ask for is
 * kept and called for every fault that is not a CPUID, and this one stays installed.
 *
 * Build: cc -O2 -shared -fPIC -o x86_64_v3.so x86_64_v3.c
 * Use:   LD_PRELOAD=./x86_64_v3.so python ...   (FHS_CPUID_MASKED=1 tells that it took)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

/* CPUID leaf 7, sub-leaf 0 */
#define L7_EBX_CLEAR ((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | \
                      (1u << 28) | (1u << 30) | (1u << 31))       /* AVX512 F DQ IFMA PF ER CD BW VL */
#define L7_ECX_CLEAR ((1u << 1) | (1u << 6) | (1u << 8) | (1u << 11) | (1u << 12) | \
                      (1u << 14))                                  /* VBMI VBMI2 GFNI VNNI BITALG VPOPCNTDQ */
#define L7_EDX_CLEAR ((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | \
                      (1u << 24) | (1u << 25))                     /* 4VNNIW 4FMAPS VP2INTERSECT AMX-BF16 FP16 AMX-TILE AMX-INT8 */
/* CPUID leaf 7, sub-leaf 1 */
#define L7S1_EAX_CLEAR ((1u << 4) | (1u << 5) | (1u << 21) | (1u << 23))  /* AVX-VNNI AVX512-BF16 AMX-FP16 AVX-IFMA */
#define L7S1_EDX_CLEAR ((1u << 4) | (1u << 5) | (1u << 10) | (1u << 19))  /* AVX-VNNI-INT8 AVX-NE-CONVERT AVX-VNNI-INT16 AVX10 */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static struct sigaction program;  /* the SIGSEGV handler the program asked for (SIG_DFL at first) */
static int masking;               /* 1 once CPUID faults in this process */

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    static sigaction_fn next;
    if (!next)
        next = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    return next(sig, act, old);
}

static long set_cpuid(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void on_segv(int sig, siginfo_t *info, void *raw) {
    ucontext_t *uc = (ucontext_t *)raw;
    greg_t *regs = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)regs[REG_RIP];
    if (ip[0] != 0x0F || ip[1] != 0xA2) {  /* a real fault: the program's handler, or the default */
        if (program.sa_flags & SA_SIGINFO) {
            program.sa_sigaction(sig, info, raw);
        } else if (program.sa_handler != SIG_DFL && program.sa_handler != SIG_IGN) {
            program.sa_handler(sig);
        } else {
            struct sigaction fallback;
            memset(&fallback, 0, sizeof fallback);
            fallback.sa_handler = SIG_DFL;
            real_sigaction(SIGSEGV, &fallback, NULL);  /* it faults again and the process dies */
        }
        return;
    }
    uint32_t leaf = (uint32_t)regs[REG_RAX], sub = (uint32_t)regs[REG_RCX];
    uint32_t a, b, c, d;
    set_cpuid(1);
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(leaf), "c"(sub));
    set_cpuid(0);
    if (leaf == 7 && sub == 0) {
        b &= ~L7_EBX_CLEAR;
        c &= ~L7_ECX_CLEAR;
        d &= ~L7_EDX_CLEAR;
    } else if (leaf == 7 && sub == 1) {
        a &= ~L7S1_EAX_CLEAR;
        d &= ~L7S1_EDX_CLEAR;
    } else if (leaf == 0x24) {  /* AVX10 leaf: nothing to report */
        a = b = c = d = 0;
    }
    regs[REG_RAX] = a;
    regs[REG_RBX] = b;
    regs[REG_RCX] = c;
    regs[REG_RDX] = d;
    regs[REG_RIP] += 2;
}

/* The program's own SIGSEGV handler is recorded, not installed, while CPUID is masked. */
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (sig != SIGSEGV || !masking)
        return real_sigaction(sig, act, old);
    if (old)
        *old = program;
    if (act)
        program = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

__attribute__((constructor)) static void mask_cpuid(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    if (real_sigaction(SIGSEGV, &action, &program) != 0)
        return;
    if (set_cpuid(0) != 0) {  /* no CPUID faulting here: leave the process as it was */
        real_sigaction(SIGSEGV, &program, NULL);
        return;
    }
    masking = 1;
    setenv("FHS_CPUID_MASKED", "1", 1);
}
