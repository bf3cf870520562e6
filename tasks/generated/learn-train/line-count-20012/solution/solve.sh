#!/bin/bash
wc -l < /app/notes.txt > /app/figure.txt
