/* action_kinds.h - the action kinds, one line each, in the order a rule's
 * action names are matched (a kind with a `match` of its own, like the hooks
 * that take any name, comes last).  Included with SMR_ACTION_KIND defined
 * (action_kind.h, action_plan.c); see action_kind.h for what a kind is. */
SMR_ACTION_KIND(smr_action_stop)
SMR_ACTION_KIND(smr_action_email)
SMR_ACTION_KIND(smr_action_sms)
SMR_ACTION_KIND(smr_action_sns)
SMR_ACTION_KIND(smr_action_alertmanager)
SMR_ACTION_KIND(smr_action_dumpstacks)
SMR_ACTION_KIND(smr_action_hook)
