#!/bin/bash
wc -l < /app/items.txt > /app/answer.txt
