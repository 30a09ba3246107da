"""Restoration: the state updater (the restore thread) that restores active tasks and keeps
standbys current, and the global stream thread that fills global stores."""
