"""Internal topics: the repartition, changelog and control topics an application needs on the cluster.

- ``manager``: ``InternalTopicManager``, which sets the topics up and checks them at start-up, on every
  rebalance and in ``KafkaStreams.init()``;
- ``partition_counts``: the partition count of each internal topic and the task count of each
  subtopology, computed from the source topics;
- ``requirements``: what each topic must look like (partition count and configs), and the control topic;
- ``validation``: checks an existing topic against its requirement;
- ``autoscaling``: grows under-partitioned topics when a source topic grows (KIP-878);
- ``repartition_purge``: deletes repartition records the application has committed past;
- ``init_parameters``: ``InitParameters``, what ``KafkaStreams.init()`` may create (public as
  ``kstreams.InitParameters``).
"""
