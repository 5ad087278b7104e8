#include <windows.h>
/* Wine 8.0 has no bcryptprimitives.dll: Rust's std and getrandom import ProcessPrng from it.
   This forwards to RtlGenRandom (advapi32!SystemFunction036). */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
