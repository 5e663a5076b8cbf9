// swift-tools-version:6.1
import PackageDescription

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
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // SMTP through libcurl: a C shim, since Swift cannot call the variadic curl_easy_setopt.
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        .target(
            name: "Bookworm",
            dependencies: [
                "CSodium",
                "CCurl",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            resources: [.copy("Resources/Migrations"), .copy("Resources/openapi.json")]
        ),
        .executableTarget(
            name: "bookworm",
            dependencies: [
                "Bookworm",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "BookwormBench",
            dependencies: [
                "Bookworm",
                "CSodium",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "BookwormTests",
            dependencies: [
                "Bookworm",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ]
)
