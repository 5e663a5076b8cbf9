import Accounts
import BookwormCore
import Exchange
import Hummingbird
import Logging

/// Reports, and Google sign-in (404 until `GOOGLE_CLIENT_IDS` is set), on the API; returns the
/// Google sign-in, which erasure also asks (an account without a password proves itself with it).
func addTrustRoutes(public v1: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>, config: Config,
                    client: Database, sessions: SessionStore, throttles: ThrottleStore, logger: Logger) -> GoogleSignIn {
    let reports = ReportsService(client: client, reports: ReportsStore(client: client, logger: logger), policy: config.reports,
                                 clock: config.clock, logger: logger)
    ReportsRoutes(service: reports).addRoutes(authenticated: authenticated)
    let verifier = config.google.enabled ? GoogleVerifier(settings: config.google, clock: config.clock, logger: logger) : nil
    let google = GoogleSignIn(client: client, verifier: verifier, sessions: sessions, throttles: throttles, policy: config.throttles,
                              clock: config.clock, logger: logger)
    GoogleRoutes(service: google).addRoutes(public: v1, authenticated: authenticated)
    return google
}
