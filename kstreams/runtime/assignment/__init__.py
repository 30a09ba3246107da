"""Assignment: the group assignor (where tasks run, from where their state is), KIP-441 task
assignment, and the metadata channel through which clients tell each other what they hold."""
