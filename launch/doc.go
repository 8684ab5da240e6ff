// Package launch starts and joins hap's multi-process jobs: one process
// per GPU, on one machine or many.
//
// It owns:
//   - rank discovery (env.go): RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
//     MASTER_PORT as torchrun sets them, or SLURM's SLURM_PROCID,
//     SLURM_NTASKS, SLURM_LOCALID and the first host of SLURM_STEP_NODELIST /
//     SLURM_JOB_NODELIST, with clear errors for missing or inconsistent
//     variables;
//   - the rendezvous (rendezvous.go): rank 0 listens on MASTER_PORT, every
//     rank proves it holds the job's token (HAP_JOB_TOKEN, by HMAC over a
//     fresh nonce), rank 0 waits for all of them within a timeout and sends
//     each an opaque payload (the NCCL unique id); every failure is an
//     error naming its cause, never a hang;
//   - Local (local.go): n processes on this machine with those variables
//     set, for `hap run` without a cluster launcher.
//
// launch imports nothing of hap: it knows ranks and bytes, not GPUs.
package launch
