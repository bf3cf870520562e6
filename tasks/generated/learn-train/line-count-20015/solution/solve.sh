#!/bin/bash
wc -l < /app/notes.txt > /app/result.txt
