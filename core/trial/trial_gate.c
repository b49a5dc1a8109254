/* trial_gate.c - the reader gate of a live trial (trial.h): rule threads
 * read the trial while the watch refreshes it, each read inside the gate,
 * each refresh alone. */
#include "trial/trial_int.h"

/* Set on the threads that evaluate rules (the runner's live workers). */
static _Thread_local bool rule_thread;
/* The trial whose gate this thread holds for reading (NULL: none). */
static _Thread_local smr_trial *held;

void smr_trial_gate_init(smr_trial *t) {
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  /* glibc's rwlock lets new readers pass a waiting writer by default: rules
   * reading in turn would then keep a refresh out for ever.  Writers first
   * is safe because no thread takes the gate twice (`held`). */
  pthread_rwlockattr_setkind_np(&a,
                                PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&t->gate, &a);
  pthread_rwlockattr_destroy(&a);
}

void smr_trial_gate_close(smr_trial *t) {
  if (t->live)
    pthread_rwlock_wrlock(&t->gate);
}

void smr_trial_gate_open(smr_trial *t) {
  if (t->live)
    pthread_rwlock_unlock(&t->gate);
}

void smr_trial_reader_thread(bool on) {
  if (!on)
    smr_trial_reader_leave();
  rule_thread = on;
}

void smr_trial_reader_enter(smr_trial *t) {
  if (!rule_thread || !t || !t->live || held == t)
    return;
  smr_trial_reader_leave(); /* another live trial: one gate at a time */
  pthread_rwlock_rdlock(&t->gate);
  held = t;
}

void smr_trial_reader_leave(void) {
  if (!held)
    return;
  pthread_rwlock_unlock(&held->gate);
  held = NULL;
}
