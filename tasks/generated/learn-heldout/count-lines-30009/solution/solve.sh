#!/bin/bash
grep -cx maple /app/notes.lst > /app/output.txt
