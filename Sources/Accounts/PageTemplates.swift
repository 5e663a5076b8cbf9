import BookwormCore
import Foundation
import Mustache

/// The HTML behind the mail links, as logic-less templates: every value is escaped by
/// mustache, and nothing runs in the page (the CSP allows no script, only this style sheet).
package struct PageTemplates: Sendable {
    let library: MustacheLibrary

    package init() throws {
        var library = MustacheLibrary()
        try library.register(Self.layout, named: "layout")
        for (name, text) in Self.pages { try library.register(text, named: name) }
        self.library = library
    }

    /// What a page shows; mustache reads these by name.
    struct Page {
        var title: String
        var heading: String
        var message: String? = nil
        var error: String? = nil
        var token: String? = nil
        var csrf: String? = nil
    }

    func render(_ template: String, _ page: Page) -> String {
        library.render(page, withTemplate: template) ?? "<!doctype html><title>Bookworm</title><p>Something went wrong.</p>"
    }

    static let style = """
        body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f3ee;color:#222}\
        main{max-width:28rem;margin:2rem auto;padding:1.5rem;background:#fff;border-radius:12px;box-shadow:0 1px 4px #0002}\
        h1{font-size:1.4rem;margin-top:0}label{display:block;margin:1rem 0 .25rem;font-weight:600}\
        input[type=password]{box-sizing:border-box;width:100%;padding:.7rem;font-size:1rem;border:1px solid #aaa;border-radius:8px}\
        button{margin-top:1.25rem;width:100%;padding:.8rem;font-size:1rem;border:0;border-radius:8px;background:#2d6a4f;color:#fff}\
        .error{background:#fde8e8;color:#8a1c1c;padding:.75rem;border-radius:8px}.ok{background:#e6f4ea;padding:.75rem;border-radius:8px}\
        @media (max-width:30rem){main{margin:0;border-radius:0;min-height:100vh}}
        """

    /// `style-src` names the sheet by its hash, so not even an injected style would apply.
    static let contentSecurityPolicy: String = {
        let hash = Data(Digest.sha256(style)).base64EncodedString()
        return "default-src 'none'; style-src 'sha256-\(hash)'; img-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    }()

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>{{title}} · Bookworm</title>
        <style>\(style)</style>
        </head>
        <body><main>
        <h1>{{heading}}</h1>
        {{#error}}<p class="error" role="alert" id="error">{{error}}</p>{{/error}}
        {{#message}}<p class="ok" id="message">{{message}}</p>{{/message}}
        {{$content}}{{/content}}
        </main></body>
        </html>
        """

    static let pages: [String: String] = [
        "notice": "{{<layout}}{{/layout}}",
        "reset": """
            {{<layout}}{{$content}}
            <form method="post" action="/reset-password">
            <input type="hidden" name="token" value="{{token}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="password">New password</label>
            <input type="password" id="password" name="password" autocomplete="new-password" minlength="10" maxlength="128" required>
            <label for="confirm">The same again</label>
            <input type="password" id="confirm" name="confirm" autocomplete="new-password" minlength="10" maxlength="128" required>
            <button type="submit" id="submit">Set my new password</button>
            </form>
            {{/content}}{{/layout}}
            """,
        "verify": """
            {{<layout}}{{$content}}
            <form method="post" action="/verify-email">
            <input type="hidden" name="token" value="{{token}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" id="submit">Confirm my email address</button>
            </form>
            {{/content}}{{/layout}}
            """,
    ]
}
