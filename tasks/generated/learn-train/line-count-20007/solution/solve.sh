#!/bin/bash
wc -l < /app/notes.lst > /app/figure.txt
