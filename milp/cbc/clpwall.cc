// Clp's wall-clock time limit, which its C interface does not offer,
// beside its CPU-time one.
//
// Clp_setMaximumSeconds sets Clp's CPU-time limit: CoinCpuTime, the user
// time of the whole process. In the isolated worker that runs the
// synthesizer's bound LP, a process given part of a core (a busy machine)
// reaches it late, past the wall-clock deadline at which the planner
// kills it, and the bound is lost; in process, other threads' time counts
// too and stops Clp early. ClpModel::setMaximumWallSeconds adds a stop on
// the wall clock; Clp stops at whichever limit comes first. Coin_C_defines.h
// shows C++ code the C interface's model (CLP_EXTERN_C), the documented
// way in.
#define CLP_EXTERN_C
#include <coin/ClpSimplex.hpp>
#include <coin/Clp_C_Interface.h>

#include "clpwall.h"

extern "C" void hapClpSetTimeLimits(void *model, double cpuSeconds, double wallSeconds)
{
  ClpSimplex *clp = static_cast<Clp_Simplex *>(model)->model_;
  clp->setMaximumSeconds(cpuSeconds);
  clp->setMaximumWallSeconds(wallSeconds);
}
