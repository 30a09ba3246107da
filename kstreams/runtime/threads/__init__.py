"""The runtime's threads: the polling thread, the stream threads and what coordinates them
(the commit barrier, the Python gate, task idling, the back-off of a replaced thread)."""
