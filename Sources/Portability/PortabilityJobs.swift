import BookwormCore
import Foundation
import Logging

/// `imports.run`: a few chunks per run (each its own transaction), again at once until the
/// import is finished; the job's lease outlasts a run by far. A run that completes resets the
/// job's attempts, so `maxAttempts` counts runs that failed or never finished, one after another.
package struct ImportJob: JobHandler {
    static let jobKind = "imports.run"
    static let maxAttempts = 5
    package let kind = Self.jobKind
    package let recurringKey: String? = nil
    package let runsLong = true
    let service: ImportService

    package init(service: ImportService) {
        self.service = service
    }

    package func run(_ job: ClaimedJob) async throws -> JobOutcome {
        guard let id = UUID(uuidString: job.key) else { return .done }
        guard job.attempts <= Self.maxAttempts else {
            try await service.giveUp(id, attempts: job.attempts - 1)
            return .done
        }
        return try await service.runChunks(id) ? .done : .again(at: service.clock.now())
    }
}

/// `exports.build`: the whole archive in one run.
package struct ExportJob: JobHandler {
    static let jobKind = "exports.build"
    package let kind = Self.jobKind
    package let recurringKey: String? = nil
    package let runsLong = true
    let service: ExportService

    package init(service: ExportService) {
        self.service = service
    }

    package func run(_ job: ClaimedJob) async throws -> JobOutcome {
        guard let id = UUID(uuidString: job.key) else { return .done }
        try await service.build(id)
        return .done
    }
}
