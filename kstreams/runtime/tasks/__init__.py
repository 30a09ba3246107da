"""A client's tasks: the task manager, task checkpoints, standby tasks, and the commit of all
tasks at once."""
