from howfast.cli import main

main()
