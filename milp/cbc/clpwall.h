#ifndef HAP_CLPWALL_H
#define HAP_CLPWALL_H
#ifdef __cplusplus
extern "C" {
#endif
/* hapClpSetTimeLimits makes the Clp_Simplex model stop once its process
   has used cpuSeconds of CPU time or wallSeconds have passed on the wall
   clock, both from now, whichever comes first (negative: no such limit).
   clpwall.cc. */
void hapClpSetTimeLimits(void *model, double cpuSeconds, double wallSeconds);
#ifdef __cplusplus
}
#endif
#endif
