"""Interactive queries: what ``KafkaStreams.store()`` reads, where state lives
(``StreamsMetadata``), and the HTTP endpoints that serve stores and metrics."""
