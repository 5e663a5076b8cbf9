import Accounts
import BookwormCore
import Exchange
import Hummingbird
import Logging

/// Reports (and, with `GOOGLE_CLIENT_IDS`, Google sign-in) on the API.
func addTrustRoutes(to authenticated: RouterGroup<AppRequestContext>, config: Config, client: Database, logger: Logger) {
    let reports = ReportsService(client: client, reports: ReportsStore(client: client, logger: logger), policy: config.reports,
                                 clock: config.clock, logger: logger)
    ReportsRoutes(service: reports).addRoutes(authenticated: authenticated)
}
