#!/bin/bash
wc -l < /app/entries.log > /app/answer.txt
