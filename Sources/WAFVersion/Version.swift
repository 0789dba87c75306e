/// The version every executable prints with `--version`, and the one the Debian package carries
/// (deploy/debian/changelog; a test holds the two together).
public enum WAFTokendVersion {
    public static let current = "0.3.0"
}
