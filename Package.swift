// swift-tools-version:6.1
import PackageDescription

/// What every room builds on besides BookwormCore.
let common: [Target.Dependency] = [
    .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "PostgresNIO", package: "postgres-nio"),
    .product(name: "Logging", package: "swift-log"),
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    .product(name: "HTTPTypes", package: "swift-http-types"),
    .product(name: "Metrics", package: "swift-metrics"),
]

let rooms: [Target.Dependency] = ["BookwormCore", "Mail", "Accounts", "Places", "Catalog", "Discovery", "Exchange", "Portability",
                                  "BookwormApp"]
let testDependencies: [Target.Dependency] = rooms + [
    "BookwormTestSupport", "FakePush",
    .product(name: "ZIPFoundation", package: "ZIPFoundation"),
    .product(name: "HummingbirdTesting", package: "hummingbird"),
    .product(name: "JWTKit", package: "jwt-kit"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
]

let package = Package(
    name: "bookworm",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "bookworm", targets: ["bookworm"]),
        .executable(name: "BookwormBench", targets: ["BookwormBench"]),
    ],
    dependencies: [
        // ConfigurationSupport is off: configuration is read from the environment by Config.swift.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/weichsel/ZIPFoundation.git", from: "0.9.20"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // Already under async-http-client; named for push's TLS settings and the tests' fake providers.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // Only for GeneratedClientTests: a typed client made from openapi.json at build time, as an iOS app makes it.
        .package(url: "https://github.com/apple/swift-openapi-generator.git", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
    ],
    targets: [
        // Only for BookwormBench's stream fleet: epoll, which Glibc's Swift module leaves out.
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // Photos through libvips: its headers and flags from pkg-config, and a C shim over its
        // variadic functions, which Swift cannot call.
        .systemLibrary(
            name: "CVipsLib",
            pkgConfig: "vips",
            providers: [.apt(["libvips-dev"])]
        ),
        .target(name: "CVips", dependencies: ["CVipsLib"]),
        // The tests' own libvips: pictures the command line cannot make, and probes of libvips bugs.
        .target(name: "CVipsProbes", dependencies: ["CVipsLib"], path: "Tests/CVipsProbes"),
        // SMTP through libcurl: a C shim, since Swift cannot call the variadic curl_easy_setopt.
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        .target(
            name: "BookwormCore",
            dependencies: [
                "CSodium",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            resources: [.copy("Resources/Migrations"), .copy("Resources/openapi.json")]
        ),
        // The rooms, bottom-up: each names only rooms below it (ARCHITECTURE.md).
        .target(name: "Mail", dependencies: ["BookwormCore", "CCurl"] + common + [
                    .product(name: "JWTKit", package: "jwt-kit"),
                    .product(name: "AsyncHTTPClient", package: "async-http-client"),
                    .product(name: "NIOSSL", package: "swift-nio-ssl"),
                    .product(name: "NIOHTTP1", package: "swift-nio"),
                ]),
        .target(name: "Accounts", dependencies: ["BookwormCore", "Mail", "CSodium"] + common + [
                    .product(name: "JWTKit", package: "jwt-kit"),
                    .product(name: "AsyncHTTPClient", package: "async-http-client"),
                    .product(name: "Mustache", package: "swift-mustache"),
                ]),
        .target(name: "Places", dependencies: ["BookwormCore", "Accounts"] + common),
        .target(name: "Catalog", dependencies: ["BookwormCore", "Accounts", "Places", "CVips"] + common),
        .target(name: "Discovery", dependencies: ["BookwormCore", "Mail", "Accounts", "Places", "Catalog"] + common),
        .target(name: "Exchange", dependencies: ["BookwormCore", "Mail", "Accounts", "Catalog", "Discovery"] + common),
        .target(name: "Portability",
                dependencies: ["BookwormCore", "Mail", "Accounts", "Places", "Catalog", "Discovery", "Exchange"] + common + [
                    .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                ]),
        .target(
            name: "BookwormApp",
            dependencies: ["BookwormCore", "Mail", "Accounts", "Places", "Catalog", "Discovery", "Exchange", "Portability"] + common + [
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "bookworm",
            dependencies: [
                // Config embeds every room's policy types: naming the rooms keeps incremental
                // builds from reusing a stale layout of it when one of them changes.
                "BookwormApp", "BookwormCore", "Mail", "Accounts", "Places", "Catalog", "Discovery", "Exchange", "Portability",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "BookwormBench",
            dependencies: [
                "BookwormCore", "Mail", "Accounts", "Places", "Catalog", "Discovery", "Exchange", "Portability", "BookwormApp",
                "CSodium", "FakePush", "CEpoll",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        // Apple's and Google's push services, played by the tests and the benchmark (HTTP/2 over TLS).
        .target(
            name: "FakePush",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/FakePush"
        ),
        // `swift run fake-push`: that fake on this machine, to try push by hand (README).
        .executableTarget(name: "fake-push", dependencies: ["FakePush"], path: "Tests/FakePushTool"),
        // Helpers every test target shares: a database per test, the app, a real SMTP sink, a manual clock.
        .target(
            name: "BookwormTestSupport",
            dependencies: rooms + ["FakePush", .product(name: "HummingbirdTesting", package: "hummingbird"),
                                   .product(name: "JWTKit", package: "jwt-kit")],
            path: "Tests/Support"
        ),
        // One test target per room.
        .testTarget(name: "BookwormCoreTests", dependencies: testDependencies + [
            .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
        ]),
        .testTarget(name: "MailTests", dependencies: testDependencies),
        .testTarget(name: "AccountsTests", dependencies: testDependencies),
        .testTarget(name: "PlacesTests", dependencies: testDependencies),
        .testTarget(name: "CatalogTests", dependencies: testDependencies + ["CVipsProbes"]),
        .testTarget(name: "DiscoveryTests", dependencies: testDependencies),
        .testTarget(name: "ExchangeTests", dependencies: testDependencies),
        .testTarget(name: "PortabilityTests", dependencies: testDependencies),
        .testTarget(name: "BookwormAppTests", dependencies: testDependencies),
        // The served document's generated client, driven against a real server.
        .testTarget(
            name: "GeneratedClientTests",
            dependencies: testDependencies + [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
            ],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
    ]
)
