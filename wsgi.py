from hooklatch import create_app

app = create_app()
