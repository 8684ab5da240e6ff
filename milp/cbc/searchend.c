// The message callback of an isolated solve (searchend.go): CBC passes
// every message its handler prints to one function; this one hands the
// end of a partial search (Cbc0005, "Partial search - best objective %g
// (best possible %g), took %d iterations and %d nodes") to Go.
#include <stdint.h>
#include <coin/Cbc_C_Interface.h>
#include "_cgo_export.h"

// hap_search_handle is the cgo.Handle of the one solve a worker process
// runs (a worker solves one model and exits).
static uintptr_t hap_search_handle;

// cbcPartialSearch is CBC's CBC_END message: doubles best objective,
// best possible, seconds; integers iterations, nodes.
enum { cbcPartialSearch = 5 };

static void hap_message(Cbc_Model *model, int msgno, int ndouble, const double *dvec,
                        int nint, const int *ivec, int nchar, char **cvec) {
	(void)model; (void)nchar; (void)cvec;
	if (msgno == cbcPartialSearch && ndouble >= 2 && nint >= 2) {
		hapCBCPartialSearch(hap_search_handle, dvec[0], dvec[1], ivec[1]);
	}
}

void hap_watch_search(void *model, uintptr_t handle) {
	hap_search_handle = handle;
	Cbc_registerCallBack((Cbc_Model *)model, hap_message);
}
