"""What the tests share, written once: waiting for other threads (waiting), KafkaStreams clients
and their config (clients), brokers (kafka_broker), the cluster test driver (cluster_test_driver),
topologies (topologies) and the Java oracle (oracle)."""

__all__: list[str] = []
