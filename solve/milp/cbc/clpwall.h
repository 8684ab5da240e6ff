#ifndef HAP_CLPWALL_H
#define HAP_CLPWALL_H
#ifdef __cplusplus
extern "C" {
#endif
/* hapClpSetMaximumWallSeconds makes the Clp_Simplex model stop on the
   wall clock, seconds from now (negative: no limit), and not on CPU
   time. clpwall.cc. */
void hapClpSetMaximumWallSeconds(void *model, double seconds);
#ifdef __cplusplus
}
#endif
#endif
