from agentrun.cli.app import main

main()
