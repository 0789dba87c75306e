import WAFTokenCtl

@main
enum WAFTokenCtlMain {
    static func main() async {
        await WAFTokenCtl.main()
    }
}
