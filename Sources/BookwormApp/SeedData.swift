/// Word lists for demo data: enough variety for realistic search, with accented names so
/// accent-insensitive search has something to find.
enum SeedData {
    static let firstNames = [
        "Ana", "João", "Zoë", "Élodie", "Søren", "Gabriel", "Chloé", "José", "Mía", "Noah", "Liam", "Emma",
        "Olivia", "Hiroshi", "Yuki", "Amélie", "Björn", "Ingrid", "Mateo", "Lucía", "Omar", "Fatima", "Priya",
        "Arjun", "Wei", "Mei", "Kwame", "Amara", "Nikolai", "Irina", "Łukasz", "Zofia", "François", "Inès",
    ]
    static let lastNames = [
        "García Márquez", "Saramago", "Müller", "Østergaard", "Nakamura", "Dubois", "Rossi", "Novák", "Kowalski",
        "Silva", "Hernández", "Smith", "Okafor", "Mensah", "Ivanova", "Chen", "Haddad", "Sharma", "O'Brien",
        "Lindqvist", "Fernández", "Costa", "Yılmaz", "Schäfer", "Papadopoulos", "Nguyen", "Kim", "Park",
    ]
    static let titleWords = [
        "Shadow", "River", "Garden", "Winter", "Silent", "Memory", "Stone", "Light", "Ocean", "Forest", "Paper",
        "Glass", "Crown", "Harbor", "Storm", "Lantern", "Orchard", "Mirror", "Journey", "Secret", "Library",
        "Soledad", "Años", "Cien", "Noche", "Città", "Été", "Mädchen", "Żywot", "Fjord", "Kyoto", "Desert",
    ]
    static let titleShapes = ["The %@ of %@", "%@ and %@", "A %@ %@", "%@ in the %@", "The Last %@", "%@ %@"]
    static let publishers = ["Penguin", "Vintage", "Gallimard", "Alfaguara", "Suhrkamp", "Einaudi", "Faber", "Picador"]
    static let languages = ["en", "es", "pt", "fr", "de", "it", "ja", "pl"]
    static let conditions = ["new", "like_new", "good", "good", "good", "fair", "fair", "poor"]
}
