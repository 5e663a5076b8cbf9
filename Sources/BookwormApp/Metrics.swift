import Accounts
import BookwormCore
import Foundation
import Hummingbird
import Logging
import Metrics
import PostgresNIO
import Prometheus
import ServiceLifecycle

/// This process's Prometheus registry. `serve` and `worker` bootstrap swift-metrics onto it when
/// `BOOKWORM_METRICS_PORT` is set; without that every metric is a no-op.
package enum AppMetrics {
    package static let registry = PrometheusCollectorRegistry()

    /// Once per process, before any metric is made.
    package static func bootstrap() {
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        _ = Counter(label: PoolUsage.replacedMetric)
    }
}

/// What `/metrics` reads when it is scraped: the pool and hashing queue of this process, and the
/// outbox and jobs from the database (the same figures from every process). Counters (requests,
/// job runs and failures, requests shed by the hashing queue) are kept as they happen.
struct MetricsScrape: Sendable {
    let database: Database
    let hasher: PasswordHasher?
    let logger: Logger

    func render() async -> String {
        let registry = AppMetrics.registry
        let pool = database.usage.snapshot
        gauge(registry, "bookworm_db_connections_in_use", help: "Pooled connections leased now").set(Int64(pool.inUse))
        gauge(registry, "bookworm_db_connections_waiting", help: "Callers waiting for a pooled connection").set(Int64(pool.waiting))
        if let hasher {
            let load = hasher.load
            gauge(registry, "bookworm_hash_waiting", help: "Requests waiting for a hashing slot").set(Int64(load.waiting))
            gauge(registry, "bookworm_hash_running", help: "Argon2id computations running").set(Int64(load.running))
        }
        do {
            try await outbox(registry)
            try await jobs(registry)
        } catch {
            logger.warning("metrics: database figures unavailable", metadata: ["error": .string(String(reflecting: error))])
        }
        return registry.emitToString()
    }

    /// The registry's gauge of that full name (made on first use), through the descriptor API:
    /// the name-and-help form is deprecated in swift-prometheus 2.
    private func gauge(_ registry: PrometheusCollectorRegistry, _ name: String, labels: [(String, String)] = [],
                       help: String) -> Prometheus.Gauge {
        let descriptor = MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        return labels.isEmpty ? registry.makeGauge(descriptor: descriptor) : registry.makeGauge(descriptor: descriptor, labels: labels)
    }

    private func outbox(_ registry: PrometheusCollectorRegistry) async throws {
        let rows = try await database.query("""
            SELECT s.status, coalesce(m.count, 0), coalesce(m.retried, 0)
            FROM unnest(ARRAY['queued', 'sent', 'failed']) AS s(status)
            LEFT JOIN (SELECT status, count(*)::int8 AS count, (count(*) FILTER (WHERE attempts > 1))::int8 AS retried
                       FROM outbox_messages GROUP BY status) m ON m.status = s.status
            """, logger: logger)
        var retried: Int64 = 0
        for try await (status, count, again) in rows.decode((String, Int64, Int64).self) {
            gauge(registry, "bookworm_outbox_messages", labels: [("status", status)],
                  help: "Mail in the outbox by status (sent rows keep their headers only)").set(count)
            retried += again
        }
        gauge(registry, "bookworm_outbox_retried_messages", help: "Messages that needed more than one attempt").set(retried)
        let due = try await database.query("""
            SELECT count(*)::int8, coalesce(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
            FROM outbox_messages WHERE status = 'queued' AND next_attempt_at <= now()
            """, logger: logger)
        for try await (count, age) in due.decode((Int64, Double).self) {
            gauge(registry, "bookworm_outbox_due", help: "Queued messages due now").set(count)
            gauge(registry, "bookworm_outbox_oldest_due_age_seconds", help: "Age of the oldest message due now").set(age)
        }
    }

    /// Per kind: jobs due and not leased, and how late the latest of them is (a fan-out is due
    /// from its creation; a recurring job from its scheduled time).
    private func jobs(_ registry: PrometheusCollectorRegistry) async throws {
        let rows = try await database.query("""
            SELECT kind, (count(*) FILTER (WHERE run_at <= now() AND (lease_until IS NULL OR lease_until < now())))::int8,
                   coalesce(EXTRACT(EPOCH FROM now() - min(greatest(run_at, created_at))
                                    FILTER (WHERE run_at <= now() AND (lease_until IS NULL OR lease_until < now()))), 0)::float8
            FROM jobs GROUP BY kind
            """, logger: logger)
        for try await (kind, due, lag) in rows.decode((String, Int64, Double).self) {
            gauge(registry, "bookworm_jobs_due", labels: [("kind", kind)], help: "Jobs due and not being run").set(due)
            gauge(registry, "bookworm_jobs_lag_seconds", labels: [("kind", kind)],
                  help: "How long the longest-waiting due job has waited").set(lag)
        }
    }
}

/// `/metrics` on its own listener (`BOOKWORM_METRICS_HOST`, loopback by default, and
/// `BOOKWORM_METRICS_PORT`), never on the public port.
func metricsService(host: String, port: Int, scrape: MetricsScrape, logger: Logger) -> some Service {
    let router = Router()
    router.get("metrics") { _, _ -> Response in
        let text = await scrape.render()
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: text)))
    }
    var metricsLogger = logger
    metricsLogger.logLevel = max(logger.logLevel, .notice)
    return Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: "bookworm-metrics"),
                       logger: metricsLogger)
}
