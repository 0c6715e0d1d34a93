"""The provider's side of an endpoint: its API credential, the webhook registered with it,
and the runs that recover the events it never delivered (docs/reconciliation.md)."""
