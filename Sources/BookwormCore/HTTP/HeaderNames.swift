import HTTPTypes

extension HTTPField.Name {
    /// A header name spelled in our source. HTTPTypes offers only failable initialisers, and
    /// the names of ours are constants: one that is not a token is a defect of ours, which the
    /// first test that sends or reads that header finds, not an input to answer.
    package static func constant(_ name: String) -> Self {
        guard let parsed = Self(name) else { preconditionFailure("not an HTTP field name: \(name)") }
        return parsed
    }
}
